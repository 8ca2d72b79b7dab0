const out = {};
for (const spec of ['./secret.json', 'secret.json', '/tmp/codemode-eval/esc/secret.json', '../esc/secret.json', '/etc/hostname']) {
  try { out[spec] = (await import(spec, { with: { type: 'json' } })).default; } catch (e) { out[spec] = 'caught: ' + e; }
}
try { out.js = (await import('./mod.js')).x } catch (e) { out.js = 'caught: ' + e }
return out;
