// Checks of llmgw with LangChain (ChatOpenAI over chat completions and
// the Responses API) and the OpenAI Agents SDK, as applications use
// them: text whole and streamed, structured output, tool calls, an agent
// loop with a function tool. It prints one JSON line: [{name, ok, error}].
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool as agentTool } from '@openai/agents';
import OpenAI from 'openai';
import { apiKey, base, check, report } from './lib.mjs';

const weather = z.object({ city: z.string(), temperature: z.number(), sunny: z.boolean() });

for (const useResponsesApi of [false, true]) {
  const api = useResponsesApi ? 'responses' : 'chat';
  const llm = new ChatOpenAI({ model: 'gpt-4o-mini', apiKey, configuration: { baseURL: base }, maxRetries: 0, useResponsesApi, timeout: 20000 });
  await check(`langchain ${api}: invoke`, async () => {
    const r = await llm.invoke('Say hello.');
    if (!r.content) throw new Error('no content');
  });
  await check(`langchain ${api}: stream`, async () => {
    let t = '';
    for await (const c of await llm.stream('Say hello.')) t += typeof c.content === 'string' ? c.content : JSON.stringify(c.content);
    if (!t) throw new Error('nothing streamed');
  });
  for (const method of ['jsonSchema', 'functionCalling']) {
    await check(`langchain ${api}: withStructuredOutput (${method})`, async () => {
      weather.parse(await llm.withStructuredOutput(weather, { method }).invoke('The weather in Paris.'));
    });
  }
  await check(`langchain ${api}: bindTools`, async () => {
    const get = tool(async ({ city }) => `sunny in ${city}`, { name: 'get_weather', description: 'the weather in a city', schema: z.object({ city: z.string() }) });
    const r = await llm.bindTools([get], { tool_choice: 'required' }).invoke('What is the weather in Paris? Use get_weather.');
    if (!r.tool_calls || r.tool_calls.length === 0 || r.tool_calls[0].name !== 'get_weather') throw new Error(`tool calls: ${JSON.stringify(r.tool_calls)}`);
  });
}

setTracingDisabled(true);
setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey, maxRetries: 0, timeout: 20000 }));
for (const which of ['chat_completions', 'responses']) {
  setOpenAIAPI(which);
  await check(`agents ${which}: a run with a function tool`, async () => {
    let called = 0;
    const add = agentTool({ name: 'add', description: 'add two numbers', parameters: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => { called++; return String(a + b); } });
    const agent = new Agent({ name: 'calc', instructions: 'use add', model: 'gpt-4o-mini', tools: [add] });
    const r = await run(agent, 'Use add to add 2 and 3.', { maxTurns: 4 });
    if (!called || !r.finalOutput) throw new Error(`tool called ${called} times, final output ${JSON.stringify(r.finalOutput)}`);
  });
  await check(`agents ${which}: structured output`, async () => {
    const agent = new Agent({ name: 'w', instructions: 'answer', model: 'gpt-4o-mini', outputType: weather });
    weather.parse((await run(agent, 'The weather in Paris.', { maxTurns: 2 })).finalOutput);
  });
  await check(`agents ${which}: streamed`, async () => {
    const agent = new Agent({ name: 's', instructions: 'answer', model: 'gpt-4o-mini' });
    const r = await run(agent, 'Say hello.', { stream: true });
    let t = '';
    for await (const c of r.toTextStream()) t += c;
    await r.completed;
    if (!t) throw new Error('nothing streamed');
  });
}
report();
