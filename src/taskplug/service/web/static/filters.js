// The list's filters submit as soon as a choice changes (a script file: the page's policy runs no inline one).
document.addEventListener("change", (event) => {
  const target = event.target;
  if (target instanceof HTMLSelectElement && target.form && target.form.id === "filters") {
    target.form.requestSubmit();
  }
});
