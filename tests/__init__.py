# A regular package, so that ``tests`` is this folder in every process. Child processes (a
# multiprocessing target defined in a test module) import it by name, and a namespace folder
# loses to any regular ``tests`` package on the path: ppi-python, a test dependency, installs
# one into site-packages.
