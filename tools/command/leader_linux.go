package command

// supported says whether this system can run command tools.
const supported = true
