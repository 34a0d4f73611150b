# nothing to do yet
