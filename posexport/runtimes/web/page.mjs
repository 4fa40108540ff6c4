// posexport's page: onnxruntime-web in a tab, driven over the DevTools protocol by
// posexport/runtimes/ort_web.py. The query names the bundle (ort.wasm.min.mjs, ort.webgpu.min.mjs), the
// provider and the WebAssembly threads (0: as the browser allows). Tensors cross as one binary blob each
// way: a little-endian uint32 header length, the JSON header {"arrays": [[name, type, dims, offset, bytes]]},
// then each array's raw bytes at an 8-byte-aligned offset from the end of the header's padding.

// onnxruntime's log reaches the console through functions its WebAssembly module binds once, when it starts:
// they are replaced now, before it does, by one that hands each line to the session creation listening (placed)
// and drops it otherwise.
let listener = null;
console.log = console.info = console.warn = console.error = (...args) => listener?.(args.join(' '));

const query = new URLSearchParams(location.search);
const provider = query.get('provider');
const sessions = new Map();
const bound = new Map();
const ARRAYS = {
  float32: Float32Array, float64: Float64Array, float16: Uint16Array, int64: BigInt64Array, uint64: BigUint64Array,
  int32: Int32Array, uint32: Uint32Array, int16: Int16Array, uint16: Uint16Array, int8: Int8Array, uint8: Uint8Array,
  bool: Uint8Array,
};

const ready = (async () => {
  const ort = await import(`../ort/${query.get('bundle')}`);
  ort.env.wasm.wasmPaths = new URL('../ort/', location.href).href;
  // onnxruntime-web's own default, made explicit so that it can be reported: threads need cross-origin isolation.
  const threads = Number(query.get('threads')) ||
    (crossOriginIsolated ? Math.min(4, Math.ceil((navigator.hardwareConcurrency || 1) / 2)) : 1);
  ort.env.wasm.numThreads = crossOriginIsolated ? threads : 1;
  // Verbose, so that each session's creation logs where its nodes run (placed() keeps those lines); runs log errors only.
  ort.env.logLevel = 'verbose';
  let adapter = null;
  if (provider === 'webgpu' && navigator.gpu) {
    adapter = await navigator.gpu.requestAdapter();
    if (adapter) ort.env.webgpu.adapter = adapter;  // the one reported is the one onnxruntime-web uses
  }
  return {ort, adapter};
})();

const QUIET = {logSeverityLevel: 3};
const pad = (n) => Math.ceil(n / 8) * 8;
const at = (path) => new URL(`../${path}`, location.href).href;  // a blob path, under the server's token

function unpack(buffer, ort) {
  const length = new DataView(buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  const base = pad(4 + length);
  const feeds = {};
  for (const [name, type, dims, offset, bytes] of header.arrays) {
    const Kind = ARRAYS[type];
    if (!Kind) throw new Error(`onnxruntime-web takes no ${type} tensors (input ${name})`);
    feeds[name] = new ort.Tensor(type, new Kind(buffer, base + offset, bytes / Kind.BYTES_PER_ELEMENT), dims);
  }
  return feeds;
}

function pack(results) {
  const arrays = [];
  const parts = [];
  let offset = 0;
  for (const [name, tensor] of Object.entries(results)) {
    const data = tensor.data;
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    arrays.push([name, tensor.type, tensor.dims, offset, bytes.byteLength]);
    parts.push(bytes, new Uint8Array(pad(bytes.byteLength) - bytes.byteLength));
    offset += pad(bytes.byteLength);
  }
  const header = new TextEncoder().encode(JSON.stringify({arrays}));
  const length = new Uint8Array(4);
  new DataView(length.buffer).setUint32(0, header.byteLength, true);
  return new Blob([length, header, new Uint8Array(pad(4 + header.byteLength) - 4 - header.byteLength), ...parts]);
}

async function fetched(path) {
  const response = await fetch(at(path));
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.arrayBuffer();
}

async function post(path, results) {
  const response = await fetch(at(path), {method: 'POST', body: pack(results)});
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
}

// Node placements from onnxruntime's verbose log of a session's creation ("Node(s) placed on [EP]. Number of
// nodes: N", then one "  OpType (name)" line per node).
async function placed(create) {
  const placements = {};
  let current = null;
  listener = (line) => {
    const head = line.match(/placed on \[(\w+)\]\. Number of nodes: (\d+)/);
    const node = line.match(/VerifyEachNodeIsAssignedToAnEp\]\s{3}(\S+) \(/);
    if (head) placements[current = head[1]] = {nodes: Number(head[2]), ops: {}};
    else if (node && current) placements[current].ops[node[1]] = (placements[current].ops[node[1]] || 0) + 1;
  };
  try {
    return {session: await create(), placements};
  } finally {
    listener = null;
  }
}

window.posexport = {
  async info() {
    const {ort, adapter} = await ready;
    const described = adapter && {
      vendor: adapter.info.vendor, architecture: adapter.info.architecture, device: adapter.info.device,
      description: adapter.info.description, fallback: Boolean(adapter.info.isFallbackAdapter),
      f16: adapter.features.has('shader-f16'), features: [...adapter.features].sort(),
    };
    return {web: ort.env.versions.web, threads: ort.env.wasm.numThreads, isolated: crossOriginIsolated,
            gpu: Boolean(navigator.gpu), adapter: described, agent: navigator.userAgent};
  },

  async load(key, spec) {
    const {ort} = await ready;
    const options = {
      executionProviders: [provider], graphOptimizationLevel: 'all', logSeverityLevel: 0, logVerbosityLevel: 0,
      externalData: spec.externalData.map(([path, data]) => ({path, data: at(data)})),
    };
    const {session, placements} = await placed(() => ort.InferenceSession.create(at(spec.model), options));
    sessions.set(key, session);
    return {inputs: session.inputNames, outputs: session.outputNames, placements};
  },

  async run(key, feedsPath, outPath) {
    const {ort} = await ready;
    const results = await sessions.get(key).run(unpack(await fetched(feedsPath), ort), QUIET);
    await post(outPath, results);
    for (const tensor of Object.values(results)) tensor.dispose();
  },

  async bind(key, feedsPath, id) {
    const {ort} = await ready;
    bound.set(id, {session: sessions.get(key), feeds: unpack(await fetched(feedsPath), ort), last: null});
  },

  async runBound(id) {
    const entry = bound.get(id);
    const results = await entry.session.run(entry.feeds, QUIET);
    if (entry.last) for (const tensor of Object.values(entry.last)) tensor.dispose();
    entry.last = results;
  },

  async boundOutputs(id, outPath) {
    await post(outPath, bound.get(id).last);
  },

  async release(keys) {
    for (const key of keys) {
      bound.delete(key);
      const session = sessions.get(key);
      sessions.delete(key);
      if (session) await session.release();
    }
  },
};
