let o={}; for (let i=0;i<1e6;i++) o={o}; return JSON.stringify(o).length
