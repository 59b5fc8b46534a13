// Checks of llmgw's knowledge bases with the official openai client,
// unchanged, as an application uses it: files uploaded, a store made and
// filled with createAndPoll and uploadAndPoll, searched, and answered
// from through the Responses API's file_search tool and through chat
// with the knowledge header. It prints one JSON line: [{name, ok, error}].
// LLMGW_KB_DOCS is the folder of documents (cmd/llmgw/testdata/kb).
import OpenAI, { toFile } from 'openai';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { apiKey, base, check, report } from './lib.mjs';

const client = new OpenAI({ baseURL: base, apiKey, maxRetries: 0, timeout: 30_000 });
const docs = process.env.LLMGW_KB_DOCS;
const doc = async (name) => toFile(await readFile(join(docs, name)), name);

function must(cond, what, value) {
  if (!cond) throw new Error(`${what}: ${JSON.stringify(value)}`);
}

let store;
await check('files.create and vectorStores.files.createAndPoll', async () => {
  const file = await client.files.create({ file: await doc('travel-policy.md'), purpose: 'assistants' });
  must(file.id.startsWith('file-') && file.filename === 'travel-policy.md', 'the file', file);
  store = await client.vectorStores.create({ name: 'handbook', metadata: { team: 'people' } });
  const vsf = await client.vectorStores.files.createAndPoll(store.id, { file_id: file.id, attributes: { kind: 'policy' } });
  must(vsf.status === 'completed' && vsf.last_error === null, 'the store file', vsf);
});

await check('vectorStores.fileBatches.uploadAndPoll', async () => {
  const batch = await client.vectorStores.fileBatches.uploadAndPoll(store.id, {
    files: [await doc('security.html'), await doc('onboarding.txt'), await doc('reisekosten.txt')],
  });
  must(batch.status === 'completed' && batch.file_counts.completed === 3 && batch.file_counts.failed === 0, 'the batch', batch);
  const s = await client.vectorStores.retrieve(store.id);
  must(s.file_counts.completed === 4 && s.status === 'completed' && s.usage_bytes > 0, 'the store', s);
});

await check('vectorStores.search', async () => {
  const page = await client.vectorStores.search(store.id, { query: 'what should I do if my laptop is stolen', max_num_results: 3 });
  const first = page.data[0];
  must(first && first.filename === 'security.html' && first.content[0].text.includes('4400'), 'the first result', page.data);
  const filtered = await client.vectorStores.search(store.id, {
    query: 'policy', filters: { type: 'eq', key: 'kind', value: 'policy' },
  });
  must(filtered.data.length > 0 && filtered.data.every((r) => r.filename === 'travel-policy.md'), 'the filtered results', filtered.data);
});

await check('responses.create with file_search', async () => {
  const r = await client.responses.create({
    model: 'gpt-4o-mini', input: 'What may a hotel night in London cost?',
    tools: [{ type: 'file_search', vector_store_ids: [store.id], max_num_results: 4 }],
    include: ['file_search_call.results'],
  });
  const call = r.output.find((o) => o.type === 'file_search_call');
  must(call && call.status === 'completed' && call.results[0].filename === 'travel-policy.md', 'the file_search_call', r.output);
  const msg = r.output.find((o) => o.type === 'message');
  const cites = msg.content.flatMap((c) => c.annotations || []).filter((a) => a.type === 'file_citation');
  must(cites.length > 0 && cites[0].filename === 'travel-policy.md', 'the citations', msg.content);
});

await check('responses.stream with file_search', async () => {
  const stream = client.responses.stream({
    model: 'gpt-4o-mini', input: 'How long must a password be?',
    tools: [{ type: 'file_search', vector_store_ids: [store.id] }],
  });
  const kinds = new Set();
  for await (const ev of stream) kinds.add(ev.type);
  const final = await stream.finalResponse();
  must(kinds.has('response.file_search_call.completed') && kinds.has('response.output_text.annotation.added'), 'the events', [...kinds]);
  must(final.output[0].type === 'file_search_call', 'the final output', final.output);
});

await check('chat.completions.create with the knowledge header', async () => {
  const c = await client.chat.completions.create(
    { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Wie hoch ist die Verpflegungspauschale?' }] },
    { headers: { 'X-LLMGW-Knowledge': store.id } },
  );
  const a = c.choices[0].message.annotations || [];
  must(a.length > 0 && a[0].type === 'file_citation' && a[0].file_citation.filename === 'reisekosten.txt', 'the annotations', a);
});

await check('vectorStores.del and files.del', async () => {
  const files = await client.vectorStores.files.list(store.id);
  for (const f of files.data) await client.files.delete(f.id);
  const d = await client.vectorStores.delete(store.id);
  must(d.deleted === true, 'the deletion', d);
  let status = 0;
  try { await client.vectorStores.retrieve(store.id); } catch (e) { status = e.status; }
  must(status === 404, 'a deleted store', status);
});

report();
