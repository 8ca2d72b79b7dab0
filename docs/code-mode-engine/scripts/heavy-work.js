// CPU work typical of a filter/join script: parse a 1.3 MB JSON result, filter, sort, group, stringify
const rows = [];
for (let i = 0; i < 20000; i++) rows.push({ path: `src/m${i % 97}/f${i}.rs`, lines: (i * 7919) % 1013, author: 'a' + (i % 31) });
const text = JSON.stringify(rows);
const back = JSON.parse(text);
const big = back.filter(r => r.lines > 500).sort((a, b) => b.lines - a.lines || a.path.localeCompare(b.path));
const by = new Map();
for (const r of back) by.set(r.author, (by.get(r.author) ?? 0) + r.lines);
const re = /m(\d+)\/f(\d+)/;
let s = 0; for (const r of back) { const m = re.exec(r.path); s += +m[1]; }
return { bytes: text.length, top: big.slice(0, 3).map(r => r.path), authors: by.size, s };
