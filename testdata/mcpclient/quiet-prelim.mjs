// @jupyter/ydoc's insertCell reads each new cell's Yjs types before they are added to
// the document, and Yjs warns once per read ("Invalid access: Add Yjs type to a
// document before reading data."): a thousand identical lines that bury a CI log and
// say nothing about our fixtures. Import this module first to count those warnings
// instead, and print one line with the count when the process exits. Every other
// warning passes through unchanged.
const prelim = 'Invalid access: Add Yjs type to a document before reading data.';
const warn = console.warn.bind(console);
let suppressed = 0;
console.warn = (...args) => {
  if (args.some((a) => typeof a === 'string' && a.includes(prelim))) {
    suppressed++;
    return;
  }
  warn(...args);
};
process.on('exit', () => {
  if (suppressed > 0) warn(`(${suppressed} Yjs "add the type to a document first" warnings from @jupyter/ydoc's insertCell not shown)`);
});
