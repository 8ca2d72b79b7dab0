return [eval("1+1"), new Function("return 2")(), (async function(){}).constructor("return 3")]
