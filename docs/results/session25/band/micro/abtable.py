# A B B A table of ab.sh output: per collective and size, A and B times and sum(B)/sum(A). usage: python abtable.py ab.txt
import re,collections,sys
def parse(path):
    cur=None; data=collections.defaultdict(lambda: collections.defaultdict(list)); extra=[]
    for ln in open(path):
        ln=ln.strip()
        m=re.match(r"== (\S+) ([AB])$",ln)
        if m: cur=m.groups(); continue
        if ln.startswith(("STEP","RATES","ALPHA","TABLE","FAST","==")): extra.append(ln); continue
        p=ln.split()
        if cur and len(p)==2 and p[0].isdigit():
            data[cur[0]][int(p[0])].append((cur[1],float(p[1])))
    return data,extra
d,e=parse(sys.argv[1])
for x in e: print(x)
print("| collective | size | A, A (us) | B, B (us) | B/A |\n|---|---|---|---|---|")
for coll in d:
    for size in sorted(d[coll]):
        a=[v for k,v in d[coll][size] if k=='A']; b=[v for k,v in d[coll][size] if k=='B']
        print(f"| {coll} | {size} | {', '.join('%.0f'%x for x in a)} | {', '.join('%.0f'%x for x in b)} | {sum(b)/sum(a):.2f} |")
