for (let i = 0; i < 201; i++) await tools.t.echo({ i }); return "done"
