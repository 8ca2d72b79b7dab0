await new Promise(() => {}); return "never"
