// Shared prelude for both engines. The host defines __host_call(name, argsJsonText) -> Promise<string>
// and __host_log(text); this file hides them behind `tools` and `console` and defines the exact-number
// JSON codec (reviver with source text access; replacer for BigInt).
(() => {
  const hostCall = globalThis.__host_call;
  const hostLog = globalThis.__host_log;
  delete globalThis.__host_call;
  delete globalThis.__host_log;
  const rawJSON = JSON.rawJSON;
  // Exact numbers. JSON.parse's reviver sees each number's source text (TC39 "JSON.parse source
  // text access": the third argument's `source`). A number whose decimal value a double holds
  // exactly stays a Number (arithmetic works) and its text is remembered per (holder, key), so an
  // object passed through unchanged prints back byte for byte ("10.50", "1.0", "-0", "1E5"). A
  // number a double cannot hold becomes a BigInt (integer syntax) or a JSON.rawJSON object
  // (decimal; `.rawJSON` is its text), both of which print back exactly wherever they go.
  const canon = (t) => {
    // decimal text -> [sign, digits, exponent] with no leading/trailing zeros
    const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(t);
    if (!m) return t;
    let d = m[2] + (m[3] || ''), e = Number(m[4] || 0) - (m[3] || '').length;
    d = d.replace(/^0+/, '');
    if (d === '') return '0';
    const z = /0*$/.exec(d)[0].length;
    return m[1] + d.slice(0, d.length - z) + 'e' + (e + z);
  };
  const texts = new WeakMap(); // holder -> Map(key -> [value, source])
  const reviver = function (key, value, context) {
    if (typeof value !== 'number' || !context || typeof context.source !== 'string') return value;
    const s = context.source;
    let keep = String(value) === s || (value === 0 && !/[1-9]/.test(s.replace(/[eE].*$/, '')))
      || (Number.isFinite(value) && canon(String(value)) === canon(s));
    if (!keep) return /^-?\d+$/.test(s) ? BigInt(s) : rawJSON(s);
    if (String(value) !== s) {
      let m = texts.get(this);
      if (!m) texts.set(this, (m = new Map()));
      m.set(key, [value, s]);
    }
    return value;
  };
  const replacer = function (key, value) {
    if (typeof value === 'bigint') return rawJSON(value.toString());
    if (typeof value === 'number') {
      const t = texts.get(this)?.get(key);
      if (t && Object.is(t[0], value)) return rawJSON(t[1]);
    }
    return value;
  };
  const encode = (v) => JSON.stringify(v === undefined ? null : v, replacer);
  const decode = (text) => JSON.parse(text, reviver);
  const call = async (name, args) => decode(await hostCall(String(name), encode(args ?? {})));
  // `tools.p.t(a)` calls `p__t`; `tools.t(a)` calls `t` (a server that keeps its names).
  const byPrefix = (prefix) => new Proxy(function () {}, {
    get: (_, tool) => (args) => call(prefix + '__' + String(tool), args),
    apply: (_, __, [args]) => call(prefix, args),
  });
  const tools = new Proxy({ call }, { get: (t, p) => (p === 'call' ? call : byPrefix(String(p))) });
  const fmt = (x) => (typeof x === 'string' ? x : encode(x));
  Object.defineProperty(globalThis, 'tools', { value: tools, enumerable: true });
  // The functions this run may call, as signatures (the host answers the reserved name).
  Object.defineProperty(globalThis, 'api', {
    value: (filter) => call('devboy__api', filter === undefined ? {} : { filter: String(filter) }), enumerable: true,
  });
  Object.defineProperty(globalThis, 'console', {
    value: Object.freeze({ log: (...a) => hostLog(a.map(fmt).join(' ')) }), enumerable: true,
  });
  Object.defineProperty(globalThis, '__finish', {
    value: (v) => (v === undefined ? '' : typeof v === 'string' ? v : encode(v)),
  });
})();
