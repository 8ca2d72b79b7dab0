"""Candidate exact encodings of a list page (array of JSON objects), each with its decoder.

Every encoder here returns text; `decode_*` gives the page back; `check()` asserts that the
decoded page re-serializes to the same compact JSON (same values, same key order).

Shared cell syntax (close to devboy's csv):
  empty cell          the key is absent in this row
  null/true/false/123 JSON literals
  "..."               a JSON string (used when the raw text would be ambiguous)
  [..] / {..}         compact JSON (an array, or an object not flattened into columns)
  &N                  (encoding c) a reference to definition N
  anything else       the string itself
Rows are lines, cells are separated by commas; a JSON cell is read with a JSON parser, so
commas inside it are fine.

(a) grouped:  rows grouped by their full flattened shape (ordered list of leaf paths); one
    table per group with an order column `#`; a group of one row is written `@i {json}`.
(b) one table: union of top-level keys as columns; a top-level object column is flattened
    into `k.sub` columns when every row that has it has the same flattened shape, otherwise
    it is carried per row as compact JSON (the irregular column, e.g. `payload`); a row whose
    key order does not fit the header is written `!{json}` in place.
(c) = (b) plus factoring: every object (below the row) that occurs twice or more in the page
    is written once as a definition and referenced by `&N` (in a cell) or by the JSON string
    "&N" (inside JSON).  Definitions come first, grouped into tables by shape like (a).
(ac) = (a) plus the same factoring.
"""
import json, re

ABSENT = object()
NUM = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$")
REF = re.compile(r"&(\d+)$")


def cj(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- cells
def enc_cell(v):
    if v is ABSENT:
        return ""
    if isinstance(v, str):
        if (v == "" or v[0] in '"[{&!@' or v != v.strip() or any(c in v for c in ",\n\r")
                or v in ("null", "true", "false") or NUM.match(v)):
            return cj(v)
        return v
    return cj(v)


_dec = json.JSONDecoder()


def dec_cells(line, n=None):
    """Split a row line into decoded cells. Refs are returned as ('&', N)."""
    out, p, L = [], 0, len(line)
    while True:
        if p < L and line[p] in '"[{':
            v, p = _dec.raw_decode(line, p)
        else:
            q = line.find(",", p)
            q = L if q < 0 else q
            t = line[p:q]
            p = q
            if t == "":
                v = ABSENT
            elif t in ("null", "true", "false"):
                v = json.loads(t)
            elif NUM.match(t):
                v = json.loads(t)
            elif REF.match(t):
                v = ("&", int(t[1:]))
            else:
                v = t
        out.append(v)
        if p >= L:
            break
        assert line[p] == ",", (line[p:p + 20],)
        p += 1
    return out


# ---------------------------------------------------------------- flattening
def leaves(v, prefix=()):
    """Leaf paths and values of an object; a non-empty object is descended, anything else is a leaf."""
    out = []
    for k, x in v.items():
        if isinstance(x, dict) and x:
            out.extend(leaves(x, prefix + (k,)))
        else:
            out.append((prefix + (k,), x))
    return out


def build(pairs):
    root = {}
    for path, v in pairs:
        d = root
        for k in path[:-1]:
            d = d.setdefault(k, {})
        d[path[-1]] = v
    return root


def enc_path(p):
    if any(("." in k or "," in k or k == "" or k[0] in '"[{#&!@') for k in p):
        return cj(list(p))
    return ".".join(p)


def dec_header(line):
    cells, p, L = [], 0, len(line)
    while p <= L:
        if p < L and line[p] == "[":
            v, p = _dec.raw_decode(line, p)
            cells.append(tuple(v))
        else:
            q = line.find(",", p)
            q = L if q < 0 else q
            t = line[p:q]
            cells.append(t if t in ("#", "&") else tuple(t.split(".")))
            p = q
        if p >= L:
            break
        p += 1
    return cells


# ---------------------------------------------------------------- factoring (c)
class Factor:
    """Objects that occur twice or more (below row level) become definitions."""

    def __init__(self, rows, min_chars=12):
        self.count = {}
        for r in rows:
            for x in r.values():
                self._count(x)
        self.ids, self.defs = {}, []
        self.min_chars = min_chars
        for r in rows:  # definitions numbered in first-seen order
            for x in r.values():
                self._assign(x)

    def _count(self, v):
        if isinstance(v, dict):
            if v:
                k = cj(v)
                self.count[k] = self.count.get(k, 0) + 1
            for x in v.values():
                self._count(x)
        elif isinstance(v, list):
            for x in v:
                self._count(x)

    def _assign(self, v):
        if isinstance(v, dict):
            k = cj(v) if v else None
            if k and self.count.get(k, 0) >= 2 and len(k) >= self.min_chars:
                if k not in self.ids:
                    self.ids[k] = len(self.defs)
                    self.defs.append(None)
                    self.defs[self.ids[k]] = {kk: self.sub(x) for kk, x in v.items()}
                return
            for x in v.values():
                self._assign(x)
        elif isinstance(v, list):
            for x in v:
                self._assign(x)

    def ref(self, v):
        """The definition number of v, or None."""
        if isinstance(v, dict) and v:
            return self.ids.get(cj(v))
        return None

    def sub(self, v):
        """v with factored objects below it replaced by "&N" strings (for JSON text)."""
        if isinstance(v, dict):
            n = self.ref(v)
            if n is not None:
                return f"&{n}"
            return {k: self.sub(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self.sub(x) for x in v]
        return v


def collides(rows):
    hit = False

    def walk(v):
        nonlocal hit
        if isinstance(v, str) and REF.match(v):
            hit = True
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    for r in rows:
        walk(r)
    return hit


def resolve(v, defs):
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "&":
        return resolve(defs[v[1]], defs)
    if isinstance(v, str) and REF.match(v):
        return resolve(defs[int(v[1:])], defs)
    if isinstance(v, dict):
        return {k: resolve(x, defs) for k, x in v.items()}
    if isinstance(v, list):
        return [resolve(x, defs) for x in v]
    return v


# ---------------------------------------------------------------- tables of same-shape objects
def cell_value(v, fac):
    """What goes into a cell for leaf value v: a ref when factored, else v (with inner refs)."""
    if fac is not None:
        n = fac.ref(v)
        if n is not None:
            return ("&", n)
        return fac.sub(v)
    return v


def enc_cell2(v):
    if isinstance(v, tuple):
        return f"&{v[1]}"
    return enc_cell(v)


def shape_of(obj, fac):
    """Leaf pairs of a row/definition; with factoring a factored sub-object is one leaf."""
    out = []

    def walk(v, prefix):
        for k, x in v.items():
            if isinstance(x, dict) and x and not (fac is not None and fac.ref(x) is not None):
                walk(x, prefix + (k,))
            else:
                out.append((prefix + (k,), x))
    walk(obj, ())
    return out


def grouped_blocks(items, fac, first):
    """items: list of (id, object). Groups by shape; returns text blocks.
    first: '#' (row order) or '&' (definition id)."""
    groups, order = {}, []
    for i, obj in items:
        pairs = shape_of(obj, fac)
        key = tuple(p for p, _ in pairs)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((i, pairs))
    blocks, singles = [], []
    for key in order:
        g = groups[key]
        if len(g) == 1:
            i, pairs = g[0]
            obj = build([(p, cell_value(v, fac) if fac else v) for p, v in pairs])
            obj = _json_with_refs(obj)
            singles.append(f"@{'' if first == '#' else '&'}{i} {cj(obj)}")
            continue
        lines = [",".join([first] + [enc_path(p) for p in key])]
        for i, pairs in g:
            lines.append(",".join([str(i)] + [enc_cell2(cell_value(v, fac) if fac else v) for _, v in pairs]))
        blocks.append("\n".join(lines))
    if singles:
        blocks.append("\n".join(singles))
    return blocks


def _json_with_refs(v):
    if isinstance(v, tuple):
        return f"&{v[1]}"
    if isinstance(v, dict):
        return {k: _json_with_refs(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_with_refs(x) for x in v]
    return v


def decode_blocks(blocks):
    """-> dict id -> raw object (refs unresolved: ('&',N) in cells, "&N" strings in JSON)."""
    out = {}
    for b in blocks:
        lines = b.split("\n")
        if lines[0].startswith("@"):
            for ln in lines:
                sp = ln.index(" ")
                tag = ln[1:sp]
                i = int(tag[1:]) if tag.startswith("&") else int(tag)
                out[i] = json.loads(ln[sp + 1:])
            continue
        header = dec_header(lines[0])
        for ln in lines[1:]:
            cells = dec_cells(ln)
            i = cells[0]
            out[i] = build([(p, v) for p, v in zip(header[1:], cells[1:]) if v is not ABSENT])
    return out


# ---------------------------------------------------------------- (a) and (ac)
def encode_a(rows, factor=False):
    fac = None
    parts = []
    if factor:
        if collides(rows):
            return None
        fac = Factor(rows)
        if fac.defs:
            parts += grouped_blocks(list(enumerate(fac.defs)), _DefFactor(fac), "&")
            parts.append("---")
    parts += grouped_blocks(list(enumerate(rows)), fac, "#")
    return "\n\n".join(parts)


class _DefFactor:
    """Inside a definition, its own sub-objects may refer to other definitions (already substituted)."""

    def __init__(self, fac):
        self.fac = fac

    def ref(self, v):
        return None

    def sub(self, v):
        return v


def decode_a(text):
    if "\n\n---\n\n" in text:
        dpart, rpart = text.split("\n\n---\n\n", 1)
        d = decode_blocks(dpart.split("\n\n"))
        defs = [d[i] for i in range(len(d))]
    else:
        rpart, defs = text, []
    r = decode_blocks(rpart.split("\n\n"))
    return [resolve(r[i], defs) for i in range(len(r))]


# ---------------------------------------------------------------- (b) and (c)
def union_order(rows):
    order = []
    for r in rows:
        prev = -1
        for k in r:
            if k in order:
                prev = order.index(k)
            else:
                order.insert(prev + 1, k)
                prev += 1
    return order


def fits(r, order):
    pos = [order.index(k) for k in r]
    return pos == sorted(pos)


def column_modes(rows, order, fac):
    """For each top-level key: ('flat', [subpaths]) or ('json', None) or ('ref', None)."""
    modes = {}
    for k in order:
        vals = [r[k] for r in rows if k in r]
        if fac is not None and any(fac.ref(v) is not None for v in vals):
            modes[k] = ("cell", None)
            continue
        shapes = {tuple(p for p, _ in leaves(v)) if isinstance(v, dict) and v else None for v in vals}
        if len(shapes) == 1 and None not in shapes:
            modes[k] = ("flat", list(shapes.pop()))
        else:
            modes[k] = ("cell", None)
    return modes


def encode_b(rows, factor=False):
    fac = None
    parts = []
    if factor:
        if collides(rows):
            return None
        fac = Factor(rows)
        if fac.defs:
            parts += grouped_blocks(list(enumerate(fac.defs)), _DefFactor(fac), "&")
            parts.append("---")
    order = union_order([r for r in rows])
    ok = [fits(r, order) for r in rows]
    modes = column_modes([r for r, o in zip(rows, ok) if o], order, fac)
    header = []
    for k in order:
        m, sub = modes[k]
        header += [(k,) + s for s in sub] if m == "flat" else [(k,)]
    lines = [",".join(enc_path(p) for p in header)]
    for r, o in zip(rows, ok):
        if not o:
            lines.append("!" + cj(fac.sub(r) if fac else r))
            continue
        cells = []
        for k in order:
            m, sub = modes[k]
            if k not in r:
                cells += [""] * (len(sub) if m == "flat" else 1)
            elif m == "flat":
                d = dict(leaves(r[k]))
                cells += [enc_cell2(cell_value(d[s], fac) if fac else d[s]) for s in sub]
            else:
                cells.append(enc_cell2(cell_value(r[k], fac) if fac else r[k]))
        lines.append(",".join(cells))
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def decode_b(text):
    if "\n\n---\n\n" in text:
        dpart, tpart = text.split("\n\n---\n\n", 1)
        d = decode_blocks(dpart.split("\n\n"))
        defs = [d[i] for i in range(len(d))]
    else:
        tpart, defs = text, []
    lines = tpart.split("\n")
    header = dec_header(lines[0])
    out = []
    for ln in lines[1:]:
        if ln.startswith("!"):
            out.append(resolve(json.loads(ln[1:]), defs))
            continue
        cells = dec_cells(ln)
        out.append(resolve(build([(p, v) for p, v in zip(header, cells) if v is not ABSENT]), defs))
    return out


def check(rows, text, decoder):
    back = decoder(text)
    return cj(back) == cj(rows)


# ---------------------------------------------------------------- (d): URL templates over own fields
URLRE = re.compile(r"^https?://")
TREF = re.compile(r"~(\d+)$")
PH = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _own_template(obj, key, url):
    subs = sorted(((len(str(v)), k, str(v)) for k, v in obj.items()
                   if k != key and isinstance(v, (str, int)) and not isinstance(v, bool)
                   and len(str(v)) >= 2 and not URLRE.match(str(v))), reverse=True)
    t = url
    if PH.search(t):
        return None  # a literal {name} in the URL would be read as a placeholder
    for _, k, s in subs:
        if s in t:
            t = t.replace(s, "{" + k + "}")
    if "{" not in t.replace("{/", "").replace("{?", ""):
        return None
    t2 = t
    if _expand(t2, obj) != url:
        return None
    return t


def _expand(t, obj):
    return PH.sub(lambda m: str(obj[m.group(1)]) if m.group(1) in obj else m.group(0), t)


def url_templates(rows):
    """Rows with own-field-derivable URL values replaced by "~N", and the template list.
    A template is used only where two or more values share it (same key, same template)."""
    cnt = {}

    def scan(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, str) and URLRE.match(x):
                    t = _own_template(v, k, x)
                    if t:
                        cnt[(k, t)] = cnt.get((k, t), 0) + 1
                else:
                    scan(x)
        elif isinstance(v, list):
            for x in v:
                scan(x)
    for r in rows:
        scan(r)
    ids, temps = {}, []

    def sub(v):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if isinstance(x, str) and URLRE.match(x):
                    t = _own_template(v, k, x)
                    if t and cnt[(k, t)] >= 2:
                        if t not in ids:
                            ids[t] = len(temps); temps.append(t)
                        out[k] = f"~{ids[t]}"
                        continue
                out[k] = sub(x)
            return out
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v
    return [sub(r) for r in rows], temps


def _tcollides(rows):
    hit = False

    def walk(v):
        nonlocal hit
        if isinstance(v, str) and TREF.match(v):
            hit = True
        elif isinstance(v, dict):
            for x in v.values(): walk(x)
        elif isinstance(v, list):
            for x in v: walk(x)
    for r in rows:
        walk(r)
    return hit


def encode_d(rows, factor=True):
    if _tcollides(rows) or collides(rows):
        return None
    rows2, temps = url_templates(rows)
    body = encode_b(rows2, factor=True)
    if body is None:
        return None
    head = "\n".join(f"~{i}={t}" for i, t in enumerate(temps))
    return (head + "\n\n===\n\n" if temps else "") + body


def decode_d(text):
    temps = []
    if "\n\n===\n\n" in text:
        head, text = text.split("\n\n===\n\n", 1)
        temps = [ln.split("=", 1)[1] for ln in head.split("\n")]
    rows = decode_b(text)

    def exp(v):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if isinstance(x, str) and TREF.match(x):
                    out[k] = _expand(temps[int(x[1:])], v)
                else:
                    out[k] = exp(x)
            return out
        if isinstance(v, list):
            return [exp(x) for x in v]
        return v
    return [exp(r) for r in rows]
