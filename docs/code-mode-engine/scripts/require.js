return require("fs")
