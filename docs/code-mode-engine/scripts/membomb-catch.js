let a=[]; try { for(;;) a.push(new Array(1e6).fill(1)) } catch (e) { const n = a.length; a = null; return "caught: " + e + " after " + n }
