let a=[];for(;;)a.push(new Array(1e6))
