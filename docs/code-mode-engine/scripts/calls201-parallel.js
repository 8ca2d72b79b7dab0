const r = await Promise.allSettled(Array.from({length: 201}, (_, i) => tools.t.echo({ i }))); return r.filter(x => x.status === "rejected").map(x => String(x.reason))
