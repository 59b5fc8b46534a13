// What the check scripts share: each check runs, its failure is kept,
// and report prints one JSON line: [{name, ok, error}].
export const base = process.env.LLMGW_BASE;
export const apiKey = process.env.LLMGW_KEY || 'none';

// A streamed call's other promises (usage, response) reject too when it
// fails: the check that made it reports the failure.
process.on('unhandledRejection', () => {});

const results = [];

export async function check(name, fn) {
  try {
    await fn();
    results.push({ name, ok: true });
  } catch (e) {
    results.push({ name, ok: false, error: String((e && (e.stack || e.message)) || e).slice(0, 2000) });
  }
}

export function report() {
  console.log(JSON.stringify(results));
}
