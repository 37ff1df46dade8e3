# warm corpus: site's work: user site, site-packages, .pth results
import site
import sys

print("site imported", "site" in sys.modules)
print("ENABLE_USER_SITE", site.ENABLE_USER_SITE)
print("USER_SITE", site.USER_SITE)
print("getsitepackages", site.getsitepackages())
print("sitecustomize", "sitecustomize" in sys.modules, "usercustomize" in sys.modules)
print("prefixes", site.PREFIXES)
