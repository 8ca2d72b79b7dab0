const f = () => Promise.resolve().then(f); f(); await tools.t.hang();
