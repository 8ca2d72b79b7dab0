const p = new Proxy({}, {}); let q = p; for (let i = 0; i < 1e6; i++) q = new Proxy(q, {}); return typeof q.x
