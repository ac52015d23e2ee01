// Helper of tokenize_throughput.sh (run it from there).
//   node tokenize_throughput.js corpus OUT.txt MEGABYTES   writes the benchmark corpus
//   node tokenize_throughput.js hf TOKENIZER.json TEXT [IDS_OUT]   Hugging Face's tokenizers
//       (npm): loads the tokenizer.json, encodes TEXT as one text (no special tokens), prints
//       "load_s encode_s ids"; IDS_OUT gets the ids as `zero tokenize` prints them
//   node tokenize_throughput.js hf-batch TOKENIZER.json TEXT   the same text cut into its
//       documents (at blank lines) and encoded with encodeBatch (all cores), the way a user
//       prepares a corpus with the library
'use strict';
const fs = require('fs');
const path = require('path');

function listFiles(dir, out) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) listFiles(full, out);
    else if (/\.(cpp|h|md|txt|cmake|sh)$/.test(entry.name)) out.push(full);
  }
  return out;
}

// A varied corpus: the repository's code and docs, the multilingual fixture corpus, lines
// shuffled with a fixed seed, repeated to the asked size. Documents end with a blank line.
function makeCorpus(outPath, megabytes) {
  const root = path.join(__dirname, '..');
  const files = [path.join(root, 'tests/fixtures/tokenizers/corpus.txt')];
  for (const dir of ['src', 'docs', 'tests']) listFiles(path.join(root, dir), files);
  let lines = [];
  for (const f of files) {
    const text = fs.readFileSync(f, 'utf8');
    lines = lines.concat(text.split('\n'));
    if (f.endsWith('corpus.txt')) for (let k = 0; k < 50; ++k) lines = lines.concat(text.split('\n'));
  }
  let seed = 12345;
  const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const target = megabytes * 1024 * 1024;
  const parts = [];
  let size = 0;
  while (size < target) {
    const start = Math.floor(random() * lines.length);
    const count = 1 + Math.floor(random() * 40);
    const chunk = lines.slice(start, start + count).join('\n') + '\n\n';
    parts.push(chunk);
    size += Buffer.byteLength(chunk);
  }
  fs.writeFileSync(outPath, parts.join(''));
}

async function hf(tokenizerPath, textPath, idsOut) {
  const { Tokenizer } = require(path.join(__dirname, '../tests/fixtures/tokenizers/node_modules/tokenizers'));
  const t0 = process.hrtime.bigint();
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const t1 = process.hrtime.bigint();
  const text = fs.readFileSync(textPath, 'utf8');
  const t2 = process.hrtime.bigint();
  const encoding = await tokenizer.encode(text, null, { addSpecialTokens: false });
  const ids = encoding.getIds();
  const t3 = process.hrtime.bigint();
  console.log(`${Number(t1 - t0) / 1e9} ${Number(t3 - t2) / 1e9} ${ids.length}`);
  if (idsOut) fs.writeFileSync(idsOut, '[' + ids.join(',') + ']\n');
}

async function hfBatch(tokenizerPath, textPath) {
  const { Tokenizer } = require(path.join(__dirname, '../tests/fixtures/tokenizers/node_modules/tokenizers'));
  const t0 = process.hrtime.bigint();
  const tokenizer = Tokenizer.fromFile(tokenizerPath);
  const t1 = process.hrtime.bigint();
  const documents = fs.readFileSync(textPath, 'utf8').split('\n\n');
  const t2 = process.hrtime.bigint();
  let count = 0;
  // Batches of 1000 documents, as a data-preparation loop would send them.
  for (let i = 0; i < documents.length; i += 1000) {
    const encodings = await tokenizer.encodeBatch(documents.slice(i, i + 1000), { addSpecialTokens: false });
    for (const e of encodings) count += e.getIds().length;
  }
  const t3 = process.hrtime.bigint();
  console.log(`${Number(t1 - t0) / 1e9} ${Number(t3 - t2) / 1e9} ${count}`);
}

const [mode, a, b] = process.argv.slice(2);
if (mode === 'corpus') makeCorpus(a, Number(b));
else if (mode === 'hf') hf(a, b, process.argv[5]).catch((e) => { console.error(e); process.exit(1); });
else if (mode === 'hf-batch') hfBatch(a, b).catch((e) => { console.error(e); process.exit(1); });
else { console.error('usage: see tokenize_throughput.sh'); process.exit(2); }
