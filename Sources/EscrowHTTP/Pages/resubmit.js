// The 503 sign-in page: posts its form again after 2, 4, 8 … seconds (at most 30 between tries), for about six
// minutes. The count lives in the tab's session storage under the stamp's time, one count a sign-in (not in a URL
// fragment, which a redirect would carry on to the app); the button always works, with or without script.
(function () {
  var stamp = document.querySelector("input[name=pe_stamp]");
  var key = "pe-signin-tries-" + (stamp ? stamp.value.split(".")[1] : ""), tries = 0;
  try { tries = parseInt(sessionStorage.getItem(key) || "0", 10) || 0; } catch (e) {}
  if (tries >= 16) {
    document.getElementById("status").textContent = "Saving did not succeed yet: please use the button.";
    return;
  }
  setTimeout(function () {
    try { sessionStorage.setItem(key, String(tries + 1)); } catch (e) {}
    document.getElementById("resubmit").submit();
  }, Math.min(30, Math.pow(2, tries + 1)) * 1000);
})();
