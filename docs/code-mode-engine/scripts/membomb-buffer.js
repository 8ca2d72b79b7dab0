const a=[]; for(;;) a.push(new ArrayBuffer(1<<26));
