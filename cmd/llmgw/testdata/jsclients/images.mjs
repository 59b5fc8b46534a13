// The official openai client's images.generate and images.edit against
// llmgw's demo config (Caddyfile.example), whose image model runs the
// simimage simulator: b64_json and url pictures are PNGs of the asked
// size; an edit's pictures show the picture edited (the simulator keeps
// part of it); streams bring partial pictures, then the pictures; bad
// requests are APIErrors that say why. red.png and blue.png are solid
// pictures the test writes beside this script.
import fs from 'node:fs';
import zlib from 'node:zlib';
import OpenAI, { toFile } from 'openai';
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

// pngMean decodes an 8-bit RGB or RGBA PNG and returns its mean red and
// blue.
function pngMean(buf) {
  const [w, h] = pngSize(buf);
  const type = buf[25];
  expect(buf[24] === 8 && (type === 2 || type === 6), `PNG depth ${buf[24]} type ${type}`);
  const bpp = type === 6 ? 4 : 3;
  const idat = [];
  for (let o = 8; o < buf.length; ) {
    const len = buf.readUInt32BE(o);
    if (buf.toString('latin1', o + 4, o + 8) === 'IDAT') idat.push(buf.subarray(o + 8, o + 8 + len));
    o += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = w * bpp;
  let prev = Buffer.alloc(stride);
  let r = 0, b = 0;
  for (let y = 0; y < h; y++) {
    const f = raw[y * (stride + 1)];
    const line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? line[i - bpp] : 0, up = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      const p = a + up - c, pa = Math.abs(p - a), pb = Math.abs(p - up), pc = Math.abs(p - c);
      const pred = [0, a, up, (a + up) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? up : c][f];
      line[i] = (line[i] + pred) & 255;
    }
    for (let x = 0; x < w; x++) { r += line[x * bpp]; b += line[x * bpp + 2]; }
    prev = line;
  }
  return [r / (w * h), b / (w * h)];
}

const red = () => toFile(fs.readFileSync('red.png'), 'red.png', { type: 'image/png' });
const blue = () => toFile(fs.readFileSync('blue.png'), 'blue.png', { type: 'image/png' });

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

await check('images.edit b64_json', async () => {
  for (const [file, reddish] of [[red, true], [blue, false]]) {
    const res = await client.images.edit({ model: 'pictures', image: await file(), prompt: 'the same, in autumn', size: '128x96', n: 2 });
    expect(res.data.length === 2 && res.size === '128x96', `pictures: ${res.data.length}, size ${res.size}`);
    const pic = Buffer.from(res.data[0].b64_json, 'base64');
    const [w, h] = pngSize(pic);
    const [r, b] = pngMean(pic);
    expect(w === 128 && h === 96, `size ${w}x${h}`);
    expect(reddish ? r > b + 60 : b > r + 60, `the picture edited does not show: mean red ${r}, blue ${b}`);
  }
});

await check('images.edit image[] and mask, url', async () => {
  const res = await client.images.edit({ model: 'pictures', image: [await red(), await blue()], mask: await blue(), prompt: 'blend them', response_format: 'url' });
  expect(res.data.length === 1 && res.size === '64x48', `pictures ${res.data.length}, size ${res.size}`);
  const got = await fetch(res.data[0].url, { headers: { Authorization: `Bearer ${apiKey}` } });
  const [w, h] = pngSize(Buffer.from(await got.arrayBuffer()));
  expect(got.status === 200 && w === 64 && h === 48, `fetching the url: ${got.status}, ${w}x${h}`);
});

// streamed reads a stream's events: their types, partial indexes and
// the completed events' pictures.
async function streamed(stream) {
  const types = [], indexes = [], done = [];
  for await (const ev of stream) {
    types.push(ev.type);
    const pic = Buffer.from(ev.b64_json, 'base64');
    pngSize(pic);
    if (ev.type.endsWith('.partial_image')) indexes.push(ev.partial_image_index);
    if (ev.type.endsWith('.completed')) {
      expect(ev.usage && typeof ev.usage.total_tokens === 'number' && ev.output_format === 'png', 'completed: ' + JSON.stringify({ ...ev, b64_json: undefined }));
      done.push(pic);
    }
  }
  return { types, indexes, done };
}

await check('images.generate stream partial_images', async () => {
  const stream = await client.images.generate({ model: 'pictures', prompt: 'a lighthouse at dusk', size: '256x128', stream: true, partial_images: 2 });
  const { types, indexes, done } = await streamed(stream);
  const want = ['image_generation.partial_image', 'image_generation.partial_image', 'image_generation.completed'];
  expect(JSON.stringify(types) === JSON.stringify(want), 'events: ' + types.join(', '));
  expect(JSON.stringify(indexes) === '[0,1]', 'partial_image_index: ' + indexes);
  const [w, h] = pngSize(done[0]);
  expect(w === 256 && h === 128, `size ${w}x${h}`);
});

await check('images.edit stream partial_images', async () => {
  const stream = await client.images.edit({ model: 'pictures', image: await red(), prompt: 'the same, at night', stream: true, partial_images: 1 });
  const { types, done } = await streamed(stream);
  expect(JSON.stringify(types) === JSON.stringify(['image_edit.partial_image', 'image_edit.completed']), 'events: ' + types.join(', '));
  const [r, b] = pngMean(done[0]);
  expect(r > b + 60, `the picture edited does not show: mean red ${r}, blue ${b}`);
});

await check('images.edit refusals', async () => {
  for (const [params, status, words] of [
    [{ model: 'pictures', image: await toFile(Buffer.from('not a picture'), 'notes.txt', { type: 'text/plain' }), prompt: 'x' }, 400, 'is not a PNG, JPEG or WebP picture'],
    [{ model: 'pictures', image: await red(), prompt: '' }, 400, 'prompt is required'],
    [{ model: 'pictures', image: await red(), prompt: 'x', partial_images: 5, stream: true }, 400, 'ask 0 to 3 partial pictures'],
    [{ model: 'sim-chat', image: await red(), prompt: 'x' }, 400, 'does not run workflows'],
  ]) {
    try {
      const res = await client.images.edit(params);
      if (params.stream) for await (const _ of res);
      throw new Error('accepted ' + JSON.stringify({ ...params, image: undefined }));
    } catch (e) {
      expect(e instanceof OpenAI.APIError, 'not an APIError: ' + e);
      expect(e.status === status && e.message.includes(words), `${e.status} ${e.message}`);
    }
  }
});

report();
