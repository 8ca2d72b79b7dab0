return 1 +
