return 1+1
