const r = await tools.t.big();
const copy = { id: r.id, price: r.price, pi: r.pi, one: r.one, cents: r.cents, e: r.e };
return {
  passthrough: r,
  types: Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v])),
  arithmetic: { idPlus1: r.id + 1n, cents2: r.cents * 2, onePlus: r.one + 1, e: r.e / 10, cmp: r.cents > 10 },
  copy,
  echo: await tools.t.echo({ id: r.id, price: r.price, big: 2n ** 70n, cents: r.cents }),
};
