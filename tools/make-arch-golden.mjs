// SPDX-License-Identifier: LGPL-2.1-or-later
// Runs llama.cpp (the prebuilt CPU libraries of the npm package
// node-llama-cpp) on the random qwen2/qwen3/BF16 models and writes what it
// computes as golden data for tests/test-arch.c; tools/make-arch-golden.sh
// installs the package and calls this. Documented in tests/data/golden/README.md.
//
//   node make-arch-golden.mjs ORACLE_DIR MODELS_DIR GOLDEN_DIR MODEL...
//
// ORACLE_DIR holds node_modules/node-llama-cpp. For each MODEL (a file stem
// in MODELS_DIR) it writes GOLDEN_DIR/MODEL__once.json and
// MODEL__once.probs.f32.
//
// The package exposes no raw logits, but with temperature 0 its sampler
// leaves them untouched and returns the softmax of the whole vocabulary
// (float32, computed in the addon); log(p_i / p_j) is then logit_i - logit_j
// to ~1e-7 wherever p_i has not underflowed, so the probabilities carry the
// full logit vector up to a constant.
import fs from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const PACKAGE_VERSION = "3.21.1";
const PROMPT = "Once upon a time";
// BOS + "Once upon a time" in the stories260K vocabulary, which every model
// here carries; fixed rather than tokenized so the goldens depend on the
// model's arithmetic only.
const PROMPT_IDS = [1, 403, 407, 261, 378];
const N_GEN = 32;
const SETTINGS = {
  n_ctx: 512,
  n_batch: 512,
  n_threads: 1,
  type_k: "F32",
  type_v: "F32",
  flash_attn: false,
};

const [oracleDir, modelsDir, goldenDir, ...stems] = process.argv.slice(2);
if (!oracleDir || !modelsDir || !goldenDir || stems.length === 0) {
  console.error("usage: node make-arch-golden.mjs ORACLE_DIR MODELS_DIR GOLDEN_DIR MODEL...");
  process.exit(2);
}

const pkgDir = path.join(oracleDir, "node_modules", "node-llama-cpp");
const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"));
if (pkg.version !== PACKAGE_VERSION) {
  // Another version is another llama.cpp: the goldens would silently move.
  console.error(`node-llama-cpp ${pkg.version} found, ${PACKAGE_VERSION} expected`);
  process.exit(1);
}
const {getLlama, GgmlType} = await import(pathToFileURL(path.join(pkgDir, "dist", "index.js")).href);
// build: "never": the prebuilt binaries or nothing, never a local compile.
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});

// One key per line and arrays on one line, like the other golden JSON, so
// that diffs stay readable and flat readers work.
function format(obj) {
  const value = (v) => (Array.isArray(v) ? `[${v.map(value).join(", ")}]` : JSON.stringify(v));
  return `{\n${Object.entries(obj).map(([k, v]) => `  ${JSON.stringify(k)}: ${value(v)}`).join(",\n")}\n}\n`;
}

// [[id, p], ...] sorted by probability descending, id ascending.
function topK(probs, k) {
  const ids = Array.from(probs.keys()).sort((a, b) => probs[b] - probs[a] || a - b);
  return ids.slice(0, k).map((id) => [id, probs[id]]);
}

async function runModel(stem) {
  const modelPath = path.join(modelsDir, `${stem}.gguf`);
  const model = await llama.loadModel({modelPath, gpuLayers: 0});
  const context = await model.createContext({
    sequences: 1,
    contextSize: SETTINGS.n_ctx,
    batchSize: SETTINGS.n_batch,
    threads: SETTINGS.n_threads,
    flashAttention: SETTINGS.flash_attn,
    experimentalKvCacheKeyType: SETTINGS.type_k,
    experimentalKvCacheValueType: SETTINGS.type_v,
  });
  const sequence = context.getSequence();
  // The sampler's candidate list is the whole vocabulary.
  const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
  const greedy = {temperature: 0};
  const next = {generateNext: {token: true, probabilities: true, options: greedy}};

  const greedyIds = [];
  const stepProbs = new Float32Array(N_GEN * nVocab);
  const top10 = [], top1Prob = [], margins = [];
  // The prompt in one batch, logits for its last token only; then one token
  // per step, each the previous step's argmax (ties: lowest id).
  let input = PROMPT_IDS.map((id, i) => (i === PROMPT_IDS.length - 1 ? [id, next] : id));
  for (let s = 0; s < N_GEN; s++) {
    const out = await sequence.controlledEvaluate(input);
    const result = out[input.length - 1]?.next;
    if (result == null || result.probabilities == null || result.token == null)
      throw new Error(`${stem}: no token and probabilities at step ${s}`);
    if (result.probabilities.size !== nVocab)
      throw new Error(`${stem}: ${result.probabilities.size} probabilities, vocabulary ${nVocab}`);
    const probs = new Float64Array(nVocab);
    for (const [id, p] of result.probabilities)
      probs[id] = p;
    stepProbs.set(probs, s * nVocab);
    const top = topK(probs, 10);
    if (top[0][0] !== result.token)
      throw new Error(`${stem}: step ${s} sampled ${result.token}, argmax is ${top[0][0]}`);
    greedyIds.push(result.token);
    top10.push(top);
    top1Prob.push(top[0][1]);
    margins.push(Math.log(top[0][1] / top[1][1]));
    input = [[result.token, next]];
  }

  let minAt = 0;
  margins.forEach((m, i) => { if (m < margins[minAt]) minAt = i; });
  const probsFile = `${stem}__once.probs.f32`;
  const golden = {
    model: `${stem}.gguf`,
    model_desc: model.typeDescription,
    architecture: model.fileInfo.metadata.general.architecture,
    prompt: PROMPT,
    prompt_ids: PROMPT_IDS,
    greedy_ids: greedyIds,
    n_prompt: PROMPT_IDS.length,
    n_gen: N_GEN,
    n_vocab: nVocab,
    step_top10: top10,
    step_top1_prob: top1Prob,
    step_top1_margin: margins,
    min_step_margin: margins[minAt],
    min_step_margin_at: minAt,
    underflow_probs: stepProbs.reduce((n, p) => n + (p === 0 ? 1 : 0), 0),
    probs_file: probsFile,
    ...SETTINGS,
    context_reports: {
      context_size: context.contextSize,
      batch_size: context.batchSize,
      flash_attention: context.flashAttention,
      kv_cache_key_type: GgmlType[context.kvCacheKeyType],
      kv_cache_value_type: GgmlType[context.kvCacheValueType],
    },
    sampler: "temperature 0 (llama.cpp greedy sampler), no penalties",
    oracle: `node-llama-cpp ${pkg.version} (npm), prebuilt CPU binaries, build: never`,
    llama_cpp_repo: llama.llamaCppRelease.repo,
    llama_cpp_release: llama.llamaCppRelease.release,
    llama_cpp_system_info: llama.systemInfo.trim(),
  };
  fs.writeFileSync(path.join(goldenDir, `${stem}__once.json`), format(golden));
  fs.writeFileSync(path.join(goldenDir, probsFile), Buffer.from(stepProbs.buffer));
  console.log(`${stem}: greedy ${greedyIds.join(" ")}`);
  console.log(`${stem}: smallest margin ${margins[minAt].toFixed(3)} at step ${minAt}`);
  await context.dispose();
  await model.dispose();
}

for (const stem of stems)
  await runModel(stem);
await llama.dispose();
