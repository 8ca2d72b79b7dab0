return await import("x")
