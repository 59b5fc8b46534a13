// The official openai client's images.generate against llmgw's demo
// config (Caddyfile.example), whose image model runs the simimage
// simulator: b64_json and url pictures are
// PNGs of the asked size; bad requests are APIErrors that say why.
import OpenAI from 'openai';
import { base, apiKey, check, report } from './lib.mjs';

const client = new OpenAI({ baseURL: base, apiKey, maxRetries: 0 });

// pngSize reads a PNG's width and height from its IHDR chunk.
function pngSize(buf) {
  const sig = buf.subarray(0, 8).toString('hex');
  if (sig !== '89504e470d0a1a0a') throw new Error('not a PNG: ' + sig);
  return [buf.readUInt32BE(16), buf.readUInt32BE(20)];
}

function expect(cond, what) {
  if (!cond) throw new Error(what);
}

await check('images.generate b64_json', async () => {
  const res = await client.images.generate({ model: 'pictures', prompt: 'a lighthouse at dusk, oil on canvas', size: '320x192', n: 2, response_format: 'b64_json' });
  expect(res.data.length === 2, 'pictures: ' + res.data.length);
  const a = Buffer.from(res.data[0].b64_json, 'base64');
  const b = Buffer.from(res.data[1].b64_json, 'base64');
  const [w, h] = pngSize(a);
  expect(w === 320 && h === 192, `size ${w}x${h}`);
  expect(!a.equals(b), 'the two pictures are the same');
  expect(typeof res.created === 'number' && res.created > 0, 'created ' + res.created);
});

await check('images.generate url', async () => {
  const res = await client.images.generate({ model: 'pictures', prompt: 'a red fox in the snow', size: '256x256', response_format: 'url' });
  expect(res.data.length === 1 && res.data[0].url.startsWith(base.replace(/\/v1$/, '')), 'url: ' + res.data[0].url);
  const got = await fetch(res.data[0].url, { headers: { Authorization: `Bearer ${apiKey}` } });
  expect(got.status === 200 && got.headers.get('content-type') === 'image/png', 'fetching the url: ' + got.status);
  const [w, h] = pngSize(Buffer.from(await got.arrayBuffer()));
  expect(w === 256 && h === 256, `size ${w}x${h}`);
});

await check('images.generate refusals', async () => {
  for (const [params, status, words] of [
    [{ model: 'pictures', prompt: 'x', size: '100x100' }, 400, 'multiple of 8'],
    [{ model: 'pictures', prompt: 'x', n: 11 }, 400, 'ask 1 to 10'],
    [{ model: 'sim-chat', prompt: 'x' }, 400, 'does not run workflows'],
    [{ model: 'nope', prompt: 'x' }, 404, 'does not exist'],
    [{ model: 'pictures', prompt: '' }, 400, 'prompt is required'],
  ]) {
    try {
      await client.images.generate(params);
      throw new Error('accepted ' + JSON.stringify(params));
    } catch (e) {
      expect(e instanceof OpenAI.APIError, 'not an APIError: ' + e);
      expect(e.status === status && e.message.includes(words), `${JSON.stringify(params)}: ${e.status} ${e.message}`);
    }
  }
});

report();
