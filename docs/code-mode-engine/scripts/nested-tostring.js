let a=[]; for (let i=0;i<1e6;i++) a=[a]; return String(a).length
