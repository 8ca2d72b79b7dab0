await tools.t.hang(); return "never"
