// The anchor side of the planning and per-turn-check comparisons: pi's own TypeScript, timed on
// this machine in the same run as pith's benches.
//
// Usage: node pi-anchor.mjs PI_PACKAGE_DIR TRANSCRIPTS_DIR OUT.json
//        node pi-anchor.mjs PI_PACKAGE_DIR --first FILE     (one cold pass, for a fresh process)
//
// PI_PACKAGE_DIR is an installed @mariozechner/pi-coding-agent (scripts/pi-anchor installs it).
// Its module files are imported by path (the package's entry point does not export
// `prepareCompaction`); nothing of it is copied here.
//
// (a) One planning pass, as pi's `compact` runs it before its model call: `prepareCompaction`
//     on the session's branch, then `convertToLlm` + `serializeConversation` of the messages to
//     summarise (and of the split turn's prefix), and the prompt text `generateSummary` builds.
//     Every timed pass gets its own deep copy of the branch (`structuredClone`, untimed), as
//     pith's bench gives every iteration its own copy of the view.
// (b) pi's per-turn check, as `_checkCompaction` runs it after each reply: the branch walk
//     (`getBranch` + `getLatestCompactionEntry`), `calculateContextTokens` of the reply's usage
//     and `shouldCompact`, on sessions of 100, 1,000, 10,000 and 100,000 entries.

import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [piDir, ...args] = process.argv.slice(2);
const dist = join(piDir, "node_modules", "@mariozechner", "pi-coding-agent", "dist", "core");
const load = (path) => import(pathToFileURL(join(dist, path)).href);

const compaction = await load("compaction/compaction.js");
const utils = await load("compaction/utils.js");
const messages = await load("messages.js");
const sessions = await load("session-manager.js");

/** The branch of a pi session file, read from a private copy (pi may rewrite what it opens). */
function branchOf(file) {
  const dir = mkdtempSync(join(tmpdir(), "pi-anchor-"));
  try {
    const copy = join(dir, "session.jsonl");
    copyFileSync(file, copy);
    return sessions.SessionManager.open(copy, dir).getBranch();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One planning pass; returns the prompt's length so the work cannot be dropped. */
function planningPass(entries) {
  const prep = compaction.prepareCompaction(entries, compaction.DEFAULT_COMPACTION_SETTINGS);
  if (!prep) return 0;
  const text = utils.serializeConversation(messages.convertToLlm(prep.messagesToSummarize));
  let prompt = `<conversation>\n${text}\n</conversation>\n\n`;
  if (prep.previousSummary) prompt += `<previous-summary>\n${prep.previousSummary}\n</previous-summary>\n\n`;
  let length = prompt.length;
  if (prep.isSplitTurn && prep.turnPrefixMessages.length > 0) {
    const prefix = utils.serializeConversation(messages.convertToLlm(prep.turnPrefixMessages));
    length += `<conversation>\n${prefix}\n</conversation>\n\n`.length;
  }
  return length;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const nowNs = () => Number(process.hrtime.bigint());

/** Median nanoseconds of `run(input)`, each call on a fresh `fresh()`, after a warm-up. */
function timeFresh(fresh, run, { warmupMs = 2000, samples = 300 } = {}) {
  let sink = 0;
  const warmEnd = nowNs() + warmupMs * 1e6;
  while (nowNs() < warmEnd) sink += run(fresh());
  const times = [];
  for (let i = 0; i < samples; i++) {
    const input = fresh();
    const start = nowNs();
    sink += run(input);
    times.push(nowNs() - start);
  }
  return { medianNs: median(times), sink };
}

/** Median nanoseconds of `run()` over batches of `batch` calls, after a warm-up. */
function timeBatched(run, { warmupMs = 1000, samples = 50, batch = 100 } = {}) {
  let sink = 0;
  const warmEnd = nowNs() + warmupMs * 1e6;
  while (nowNs() < warmEnd) sink += run();
  const times = [];
  for (let i = 0; i < samples; i++) {
    const start = nowNs();
    for (let j = 0; j < batch; j++) sink += run();
    times.push((nowNs() - start) / batch);
  }
  return { medianNs: median(times), sink };
}

/** A pi session of `n` message entries: user turns and replies that report usage. */
function sessionOf(n) {
  const sm = sessions.SessionManager.inMemory("/tmp");
  const usage = { input: 1000, output: 200, cacheRead: 0, cacheWrite: 0, totalTokens: 1200,
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  let last;
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) {
      sm.appendMessage({ role: "user", content: [{ type: "text", text: `request ${i}` }], timestamp: i });
    } else {
      last = { role: "assistant", content: [{ type: "text", text: `reply ${i}` }], api: "openai-completions",
        provider: "openai", model: "gpt-4o", usage, stopReason: "stop", timestamp: i };
      sm.appendMessage(last);
    }
  }
  return { sm, last };
}

/** pi's per-turn check after `reply` (the threshold case of `_checkCompaction`). */
function perTurnCheck(sm, reply) {
  const latest = sessions.getLatestCompactionEntry(sm.getBranch());
  if (latest !== null && reply.timestamp <= new Date(latest.timestamp).getTime()) return 0;
  const tokens = compaction.calculateContextTokens(reply.usage);
  return compaction.shouldCompact(tokens, 128000, compaction.DEFAULT_COMPACTION_SETTINGS) ? 1 : 2;
}

if (args[0] === "--first") {
  const entries = branchOf(args[1]);
  const start = nowNs();
  const length = planningPass(entries);
  process.stdout.write(JSON.stringify({ firstNs: nowNs() - start, length }) + "\n");
  process.exit(0);
}

const [transcripts, out] = args;
const piFiles = readdirSync(join(transcripts, "pi-session"))
  .filter((f) => f.endsWith(".jsonl"))
  .sort();
const planning = [];
for (const name of piFiles) {
  const file = join(transcripts, "pi-session", name);
  const entries = branchOf(file);
  const first = spawnSync(process.execPath, [process.argv[1], piDir, "--first", file], { encoding: "utf8" });
  if (first.status !== 0) throw new Error(`first pass on ${name} failed: ${first.stderr}`);
  const { firstNs } = JSON.parse(first.stdout);
  const { medianNs } = timeFresh(() => structuredClone(entries), planningPass);
  const promptChars = planningPass(structuredClone(entries));
  planning.push({ file: `pi-session/${name}`, entries: entries.length, promptChars, medianNs, firstNs });
  process.stderr.write(`pi planning ${name}: median ${(medianNs / 1e3).toFixed(1)} µs, first ${(firstNs / 1e3).toFixed(1)} µs\n`);
}
const check = [];
for (const n of [100, 1000, 10000, 100000]) {
  const { sm, last } = sessionOf(n);
  // The check grows faster than linearly with the entries: fewer, shorter samples at the top.
  const plan = n >= 100000 ? { batch: 1, samples: 11 } : n >= 10000 ? { batch: 5, samples: 21 } : { batch: 200, samples: 51 };
  const { medianNs } = timeBatched(() => perTurnCheck(sm, last), plan);
  check.push({ entries: n, medianNs });
  process.stderr.write(`pi per-turn check at ${n} entries: ${(medianNs / 1e3).toFixed(2)} µs\n`);
}
writeFileSync(out, JSON.stringify({ node: process.version, planning, check }, null, 2) + "\n");
