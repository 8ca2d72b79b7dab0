function f(){f()} try { f() } catch (e) { return "caught: " + e }
