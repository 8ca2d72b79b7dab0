const a = 1;
const b = 2;
throw new Error("line three")
