package downstream

// Hopless is hopless, for the external tests.
var Hopless = hopless
