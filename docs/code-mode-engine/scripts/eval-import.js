try { return await (async function(){}).constructor("return await import(\"fs\")")() } catch (e) { return "caught: " + e }
