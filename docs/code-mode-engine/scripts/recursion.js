function f(){f()} f()
