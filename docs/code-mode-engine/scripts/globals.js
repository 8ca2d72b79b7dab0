return Object.getOwnPropertyNames(globalThis).sort()
