// Checks of llmgw with the Vercel AI SDK (its OpenAI and Anthropic
// providers), as an application would use them: structured output,
// whole and streamed text. It prints one JSON line: [{name, ok, error}].
// LLMGW_BASE is the gateway's /v1 URL; LLMGW_KEY its API key.
import { generateObject, generateText, streamText, streamObject, Output } from 'ai';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';
import { apiKey, base, check, report } from './lib.mjs';

const anthropic = createAnthropic({ baseURL: base, apiKey });
const openai = createOpenAI({ baseURL: base, apiKey });
const weather = z.object({ city: z.string(), temperature: z.number(), sunny: z.boolean(), tags: z.array(z.string()) });

function fits(object) {
  const r = weather.safeParse(object);
  if (!r.success) throw new Error(`the object does not fit the schema: ${JSON.stringify(object)}: ${r.error.message}`);
}

const models = [
  ['anthropic messages', anthropic('claude-sonnet-4-5')],
  ['openai chat', openai.chat('gpt-4o-mini')],
  ['openai responses', openai.responses('gpt-4o-mini')],
];
for (const [api, model] of models) {
  await check(`${api}: generateObject`, async () => {
    const { object } = await generateObject({ model, maxRetries: 0, abortSignal: AbortSignal.timeout(20_000), schema: weather, prompt: 'The weather in Paris, as an object.' });
    fits(object);
  });
  await check(`${api}: streamObject`, async () => {
    const r = streamObject({ model, maxRetries: 0, abortSignal: AbortSignal.timeout(20_000), onError: () => {}, schema: weather, prompt: 'The weather in Rome, as an object.' });
    let partials = 0;
    for await (const _ of r.partialObjectStream) partials++; // the result settles once the stream is read
    fits(await r.object);
    if (partials < 2) throw new Error(`${partials} partial objects: the answer was not streamed`);
  });
  await check(`${api}: generateText with Output.object`, async () => {
    const { output } = await generateText({ model, maxRetries: 0, abortSignal: AbortSignal.timeout(20_000), output: Output.object({ schema: weather }), prompt: 'The weather in Oslo, as an object.' });
    fits(output);
  });
  await check(`${api}: generateText`, async () => {
    const { text, usage } = await generateText({ model, maxRetries: 0, abortSignal: AbortSignal.timeout(20_000), prompt: 'Say hello.', maxOutputTokens: 16 });
    if (!text) throw new Error('no text');
    if (!(usage.outputTokens > 0)) throw new Error(`usage: ${JSON.stringify(usage)}`);
  });
  await check(`${api}: streamText`, async () => {
    let streamErr;
    const r = streamText({ model, maxRetries: 0, abortSignal: AbortSignal.timeout(20_000), onError: (e) => { streamErr = e.error; }, prompt: 'Say hello.', maxOutputTokens: 16 });
    let text = '';
    for await (const part of r.textStream) text += part;
    if (streamErr) throw streamErr;
    if (!text) throw new Error('no streamed text');
  });
}
report();
