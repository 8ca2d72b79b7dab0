function f(...a){ f(...a, ...a) } f(1)
