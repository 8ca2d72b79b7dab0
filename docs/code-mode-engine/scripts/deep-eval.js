return eval("(".repeat(1e5) + "1" + ")".repeat(1e5))
