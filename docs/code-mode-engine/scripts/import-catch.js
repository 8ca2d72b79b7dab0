try { await import("fs") } catch (e) { return "caught: " + e }
