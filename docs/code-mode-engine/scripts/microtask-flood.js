const f = () => Promise.resolve().then(f); f(); await new Promise(() => {});
