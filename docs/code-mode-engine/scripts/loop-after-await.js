await tools.t.echo({}); for(;;){}
