const r = await tools.t.big(); try { return r.id + 1 } catch (e) { return "caught: " + e }
