// SPDX-License-Identifier: LGPL-2.1-or-later
// llama.cpp's speed on a GGUF, measured the way gst-llm-bench measures
// gst-llm: per repetition, clear the context, evaluate a random prompt of
// P tokens and take the first token (pp, TTFT), then generate N tokens
// greedily one at a time (tg, ITL). Uses node-llama-cpp's public API over
// its prebuilt CPU build of llama.cpp; prints one JSON object.
//
// Two sets of figures: wall-clock ones as the JavaScript caller sees them,
// and llama.cpp's own (llama_perf_context, via printTimings), which time
// llama_decode alone. The second are the ones to compare with the engine;
// the first add node-llama-cpp's own cost per token.
//
//   node llama-cpp-bench.mjs -m FILE [-t THREADS] [-p P] [-n N] [-r REPS] [--seed S]
//
// Run it from a directory where node-llama-cpp is installed
// (tools/compare-llama-cpp.sh does that in a temporary directory), with
// UV_THREADPOOL_SIZE=1: node's default pool of four workers competes with
// ggml's threads and, on two cores, makes decoding three times slower.

import process from "node:process";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function parseArgs(argv) {
    const o = { model: null, threads: 2, p: 128, n: 64, reps: 5, seed: 42 };
    for (let i = 2; i < argv.length; i++) {
        const a = argv[i], v = argv[i + 1];
        switch (a) {
            case "-m": case "--model": o.model = v; i++; break;
            case "-t": case "--threads": o.threads = Number(v); i++; break;
            case "-p": case "--n-prompt": o.p = Number(v); i++; break;
            case "-n": case "--n-gen": o.n = Number(v); i++; break;
            case "-r": case "--repetitions": o.reps = Number(v); i++; break;
            case "--seed": o.seed = Number(v); i++; break;
            case "-h": case "--help":
                console.log("usage: node llama-cpp-bench.mjs -m FILE [-t THREADS] [-p P] [-n N] [-r REPS] [--seed S]");
                process.exit(0);
            default:
                console.error(`llama-cpp-bench: unknown option ${a}`);
                process.exit(2);
        }
    }
    if (!o.model) {
        console.error("llama-cpp-bench: give a model with -m FILE");
        process.exit(2);
    }
    return o;
}

// mulberry32: small, seedable, the same ids on every run.
function rng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

function stat(v) {
    if (v.length === 0) return { mean: null, sd: null };
    const mean = v.reduce((s, x) => s + x, 0) / v.length;
    const sd = v.length > 1 ? Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / (v.length - 1)) : 0;
    return { mean, sd };
}

function p95(v) {
    const s = [...v].sort((a, b) => a - b);
    return s[Math.max(0, Math.ceil(0.95 * s.length) - 1)];
}

const o = parseArgs(process.argv);
if (process.env.UV_THREADPOOL_SIZE !== "1")
    console.error("llama-cpp-bench: UV_THREADPOOL_SIZE is not 1; decode figures may be low");
// llama_perf_context_print's lines, the only info-level logs kept.
const perfLines = [];
function logger(level, message) {
    if (message.includes("llama_perf_context_print"))
        perfLines.push(message);
    else if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal)
        process.stderr.write(message + "\n");
}
// Reads and resets llama.cpp's counters: {promptMs, promptTokens, evalMs, evalRuns}.
async function takeTimings(context) {
    perfLines.length = 0;
    await context.printTimings();
    const text = perfLines.join("\n");
    const num = (re) => { const m = text.match(re); return m ? Number(m[1]) : NaN; };
    return {
        promptMs: num(/prompt eval time =\s*([\d.]+) ms/),
        promptTokens: num(/prompt eval time =\s*[\d.]+ ms \/\s*(\d+) tokens/),
        // ":" then spaces: not the "prompt eval time" line.
        evalMs: num(/:\s+eval time =\s*([\d.]+) ms/),
        evalRuns: num(/:\s+eval time =\s*[\d.]+ ms \/\s*(\d+) runs/),
    };
}
// build "never" and no download: only the prebuilt binaries shipped in the
// npm package are used.
const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    maxThreads: o.threads, logLevel: LlamaLogLevel.info, logger,
});
const model = await llama.loadModel({ modelPath: path.resolve(o.model), gpuLayers: 0, useMmap: true });
const nVocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length
    ?? model.fileInsights.vocabularySize;
const context = await model.createContext({
    contextSize: o.p + o.n + 16,
    // One batch for the whole prompt, as gst-llm evaluates it in one call.
    batchSize: Math.max(o.p, 1),
    threads: { ideal: o.threads, min: o.threads },
    sequences: 1,
    performanceTracking: true,
});
const seq = context.getSequence();
const rand = rng(o.seed);
const randomIds = (k) => Array.from({ length: k }, () => Math.floor(rand() * nVocab));

// Warm-up: maps the weights in and starts the threads.
await seq.evaluateWithoutGeneratingNewTokens(randomIds(8));
await seq.clearHistory();
await takeTimings(context);

const pp = [], tg = [], ttft = [], itlMean = [], itlP95 = [], ppCpp = [], tgCpp = [];
for (let r = 0; r < o.reps; r++) {
    await seq.clearHistory();
    const prompt = randomIds(o.p);
    const gen = seq.evaluate(prompt, { temperature: 0 });
    const t0 = performance.now();
    await gen.next();                       // prompt, then the first token
    const t1 = performance.now();
    pp.push(o.p / ((t1 - t0) / 1e3));
    ttft.push(t1 - t0);
    const steps = [];
    let last = t1;
    for (let i = 0; i < o.n; i++) {
        const res = await gen.next();
        const now = performance.now();
        if (res.done) break;
        steps.push(now - last);
        last = now;
    }
    await gen.return();
    const t = await takeTimings(context);
    ppCpp.push(t.promptTokens / (t.promptMs / 1e3));
    tgCpp.push(t.evalRuns / (t.evalMs / 1e3));
    const total = steps.reduce((s, x) => s + x, 0);
    tg.push(steps.length / (total / 1e3));
    itlMean.push(total / steps.length);
    itlP95.push(p95(steps));
}

const s = (v) => stat(v);
console.log(JSON.stringify({
    engine: "llama.cpp",
    llama_cpp_release: llama.llamaCppRelease?.release ?? null,
    model: path.basename(o.model),
    threads: o.threads,
    n_prompt: o.p,
    n_gen: o.n,
    repetitions: o.reps,
    flash_attention: context.flashAttention,
    // llama.cpp's own timing of llama_decode (compare these).
    pp_tokens_per_s: s(ppCpp).mean, pp_tokens_per_s_sd: s(ppCpp).sd,
    tg_tokens_per_s: s(tgCpp).mean, tg_tokens_per_s_sd: s(tgCpp).sd,
    // As the JavaScript caller sees it.
    wall_pp_tokens_per_s: s(pp).mean, wall_pp_tokens_per_s_sd: s(pp).sd,
    wall_tg_tokens_per_s: s(tg).mean, wall_tg_tokens_per_s_sd: s(tg).sd,
    wall_ttft_ms: s(ttft).mean, wall_itl_ms_mean: s(itlMean).mean, wall_itl_ms_p95: s(itlP95).mean,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
