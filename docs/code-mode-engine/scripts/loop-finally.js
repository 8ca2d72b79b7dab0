try { for(;;){} } finally { for(;;){} }
