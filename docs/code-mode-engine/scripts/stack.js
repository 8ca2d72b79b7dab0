const a = 1;
try { null.x } catch (e) { return [String(e), e.stack, e.lineNumber ?? null] }